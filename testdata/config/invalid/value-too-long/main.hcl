# Values longer than a host's command line takes (issue 22, item 2): one
# string over Linux's MAX_ARG_STRLEN (128 KiB), and values that together do
# not fit in the one string the SSH command line travels in.
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image = "vllm/vllm-openai:v0.11.0"
  head  = node.spark1
  env   = { BIG = format("%0140000d", 0) }
}

node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}

ray_cluster "other" {
  image = "vllm/vllm-openai:v0.11.0"
  head  = node.spark2
}

vllm_serve "qwen" {
  cluster = ray_cluster.other
  model   = "Qwen/Qwen3-8B"
  env     = { NOTES = format("%0100000d", 0) }
}
