node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}

network "fabric" {
  cidr = "192.168.200.0/24"
}

ray_cluster "main" {
  image   = "img"
  head    = node.spark1
  workers = [node.spark2]
  network = network.fabric
}

vllm_serve "qwen" {
  cluster              = ray_cluster.main
  model                = "Qwen/Qwen3-8B"
  tensor_parallel_size = 2
  extra_args           = ["--tensor_parallel_size", "4", "--pipeline-parallel=2", "--port=9000", "-t", "2", "--max", "3", "--enable-prefix-caching"]
}
