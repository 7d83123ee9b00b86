# Two NVIDIA DGX Sparks (GB10, one GPU and 120 GB of unified memory each)
# joined by a QSFP RoCE link, serving Qwen3.5-122B-A10B-FP8 with tensor
# parallelism across both boxes.
#
# Each Spark has two networks: the management network (10.1.230.0/24, SSH and
# the default route) and the fabric (192.168.200.0/24 on enp1s0f1np1). Ray,
# vLLM and NCCL must all use the fabric: without pinning, Ray registers the
# head under its management address and the worker's c10d connection to
# 10.1.230.180 times out. The network block below pins every layer to the
# fabric on both nodes.
#
# Unified memory confuses Ray's memory monitor, which kills workers while the
# weights load; it is turned off, and gpu_memory_utilization leaves headroom.
#
#   rayform -chdir=examples/dgx-spark-pair validate
#   rayform -chdir=examples/dgx-spark-pair plan

# The deployment's name: rayform's containers carry it, and find it again
# from any checkout of this configuration.
rayform {
  project = "spark-pair"
}

node "spark1" {
  host = "10.1.230.180"
  user = "aurora"
  gpus = 1
}

node "spark2" {
  host = "10.1.230.181"
  user = "aurora"
  gpus = 1
}

network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}

ray_cluster "spark" {
  image          = "hellohal2064/vllm-qwen3.5-gb10"
  head           = node.spark1
  workers        = [node.spark2]
  network        = network.fabric
  memory_monitor = false
  volumes        = ["/home/aurora/.cache/huggingface:/root/.cache/huggingface"]
}

vllm_serve "qwen" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3.5-122B-A10B-FP8"
  served_model_name      = "qwen3.5-122b"
  tensor_parallel_size   = 2
  gpu_memory_utilization = 0.85
  max_model_len          = 32768
  ready_timeout          = "30m"
}

output "endpoint" {
  description = "OpenAI-compatible base URL, on the head's fabric address."
  value       = vllm_serve.qwen.endpoint
}

output "public_endpoint" {
  description = "The same URL on the head's SSH address: reachable from the operator's machine."
  value       = vllm_serve.qwen.public_endpoint
}

output "ray_address" {
  description = "Ray GCS address (head fabric address and port)."
  value       = ray_cluster.spark.address
}

output "fabric_addresses" {
  description = "Each node's address on the fabric."
  value       = network.fabric.addresses
}
