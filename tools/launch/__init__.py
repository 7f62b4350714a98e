"""How eyas launches the vLLM servers it starts itself: from production's own launch."""
