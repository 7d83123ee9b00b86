ray_cluster "main" {
  image = "rayproject/ray:2.49.0-py312-gpu"
head = node.spark-a
workers = [node.spark-b,
node.spark-c]
  env = {
  NCCL_SOCKET_IFNAME="enp1s0f1np1"
      GLOO_SOCKET_IFNAME = "enp1s0f1np1"
    RAY_memory_monitor_refresh_ms="0"
  }
      health_check {
    timeout="60s"
interval = "5s"
      }
}

vllm_serve "llama" {
  cluster=ray_cluster.main
  model = "meta-llama/Llama-3.1-70B-Instruct"
  tensor_parallel_size = 2
  pipeline_parallel_size=length(ray_cluster.main.workers)+1
  args=["--max-model-len",   "8192",
    "--gpu-memory-utilization","0.85"]
}
