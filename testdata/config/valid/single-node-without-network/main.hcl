# One host needs no fabric: Ray and vLLM stay on the node.
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image = "vllm/vllm-openai:v0.11.0"
  head  = node.spark1
}

vllm_serve "qwen" {
  cluster = ray_cluster.main
  model   = "Qwen/Qwen3-8B"
}
