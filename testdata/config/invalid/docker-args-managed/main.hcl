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
  docker_args  = ["-dit", "--net=host", "-e", "NCCL_SOCKET_IFNAME=eth0", "--env=GLOO_SOCKET_IFNAME=eth0", "--ipc", "private", "--shm-size=1g", "-v", "/d:/d", "--privileged"]
}

vllm_serve "qwen" {
  cluster              = ray_cluster.main
  model                = "Qwen/Qwen3-8B"
  tensor_parallel_size = 2
}
