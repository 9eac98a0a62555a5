"""The reference server: a simulated SGLang deployment, its GPUs and an nvidia-smi stand-in."""

