# Two DGX Sparks whose management addresses cannot reach each other: without
# a network, Ray and vLLM's c10d master use the head's management address.
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}

ray_cluster "main" {
  image   = "vllm/vllm-openai:v0.11.0"
  head    = node.spark1
  workers = [node.spark2]
}
