"""Facts about released SGLang and vLLM servers, read statically from their wheels (never imported or run)."""
