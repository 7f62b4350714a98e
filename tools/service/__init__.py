"""Control of the production vLLM service: systemd where it runs as PID 1, else a stand-in that runs the unit."""
