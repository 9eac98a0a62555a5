"""The K2.6 DFlash crash as SGLang logs it (its `server_args=` line first, then the CUDA-graph crash under DFLASH
speculative decoding) and the hint bringup gives for it."""

from __future__ import annotations

# the K2.6 DFlash crash as SGLang logs it: its arguments line first (`server_args=ServerArgs(...)`, every field,
# defaults included), then load, capture, ready, and the DFLASH verify faulting at a graph replay (the wordings of
# tests/helpers/reducer_events.py, from the released wheels)
SERVER_ARGS = ("[2026-05-29 16:59:40] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6', "
               "tokenizer_path='/root/models/Kimi-K2.6', tokenizer_mode='auto', skip_tokenizer_init=False, "
               "load_format='auto', trust_remote_code=True, dtype='auto', kv_cache_dtype='auto', "
               "quantization=None, context_length=None, device='cuda', served_model_name='/root/models/Kimi-K2.6', "
               "chat_template=None, is_embedding=False, revision=None, host='0.0.0.0', port=30001, "
               "mem_fraction_static=0.85, max_running_requests=None, chunked_prefill_size=8192, "
               "max_prefill_tokens=16384, schedule_policy='fcfs', schedule_conservativeness=1.0, "
               "cpu_offload_gb=0, tp_size=8, ep_size=8, stream_interval=1, random_seed=42, "
               "watchdog_timeout=300, log_level='info', log_requests=False, enable_metrics=True, "
               "decode_log_interval=40, api_key=None, file_storage_path='sglang_storage', dp_size=1, "
               "load_balance_method='round_robin', dist_init_addr=None, nnodes=1, node_rank=0, "
               "json_model_override_args='{}', lora_paths=None, max_loras_per_batch=8, "
               "attention_backend='flashinfer', sampling_backend='flashinfer', "
               "speculative_algorithm='DFLASH', speculative_draft_model_path='/root/models/Kimi-K2.6-DFlash', "
               "speculative_num_steps=None, speculative_eagle_topk=None, speculative_num_draft_tokens=8, "
               "speculative_dflash_block_size=8, disable_cuda_graph=False, disable_cuda_graph_padding=False, "
               "cuda_graph_max_bs=256, cuda_graph_bs=[1, 2, 4, 8, 16, 24, 32], enable_torch_compile=False, "
               "skip_server_warmup=False, enable_p2p_check=False)")


DFLASH_CRASH = [
    SERVER_ARGS,
    "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB",
    "[2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration, "
    "quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.24 GB.",
    "[2026-05-29 17:01:10 TP0 EP0] Capture cuda graph begin. This can take up to several minutes.",
    "[2026-05-29 17:05:40] The server is fired up and ready to roll!",
    "[2026-05-29 17:06:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/dflash_worker_v2.py", line 715, '
    "in forward_batch_generation",
    "    verify_output = self.verify(batch)",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 1021, '
    "in replay",
    "    self.graphs[self.bs].replay()",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
]


DFLASH_HINT = "CUDA graphs crashed with DFLASH speculative decoding: restart with CUDA graphs off"
