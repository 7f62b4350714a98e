"""The shapes of real targets the planning tests plan for (what /v1/models and config.json would say)."""

from __future__ import annotations

from eyas.tools.planning.model_dims import ModelDims

# The embedded target, SmolLM2-135M-Instruct.
SMOLLM2 = ModelDims(hidden_size=576, num_layers=30, vocab_size=49152, intermediate_size=1536)

# Kimi-K2.5's config.json as the motivating operator's model directory holds it (moonshotai/Kimi-K2.5, abridged to
# the keys eyas or its workloads read): the kimi_k25 wrapper whose remote code (auto_map) delegates to DeepSeek-V3's
# language model in text_config, and the compressed-tensors INT4 quantization of its experts (group size 32).
KIMI_K25_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "auto_map": {
        "AutoConfig": "configuration_kimi_k25.KimiK25Config",
        "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
    },
    "tie_word_embeddings": False,
    "text_config": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "n_routed_experts": 384,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 163840,
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    },
    "quantization_config": {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True},
                "input_activations": None,
                "output_activations": None,
            }
        },
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "kv_cache_scheme": None,
    },
}
