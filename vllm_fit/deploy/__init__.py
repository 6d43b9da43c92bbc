"""Deployment repos: write fits where deployments read them (`vllm-fit apply`)."""
