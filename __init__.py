"""eyas trains EAGLE-3 speculative-decoding drafters for a target LLM served by vLLM.

The repository's agents/, graph/, tools/ and prompts/ folders install as `eyas.agents`, `eyas.graph`, ...
(tools/packaging/wheel_layout.py); `eyas` is the command line (eyas.agents.faces.cli.main).
"""

__version__ = "0.2.0"
