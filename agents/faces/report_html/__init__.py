"""The run's report as one self-contained HTML page (report.html): charts as inline SVG, no script, no CDN."""
