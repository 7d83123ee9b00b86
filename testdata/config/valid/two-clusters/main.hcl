# Two independent clusters on two networks, one of them serving two models.
node "a" {
  host = "a"
  gpus = 2
}

node "b" {
  host = "b"
  gpus = 2
}

node "c" {
  host = "c"
  gpus = 4
}

network "n1" {
  cidr = "192.168.200.0/24"
}

network "n2" {
  cidr      = "192.168.201.0/24"
  interface = { c = "eth1" }
}

ray_cluster "one" {
  image   = "img"
  head    = node.a
  workers = [node.b]
  network = network.n1
}

ray_cluster "two" {
  image   = "img"
  head    = node.c
  network = network.n2
}

vllm_serve "small" {
  cluster              = ray_cluster.two
  model                = "small"
  tensor_parallel_size = 2
  port                 = 8001
}

vllm_serve "tiny" {
  cluster              = ray_cluster.two
  model                = "tiny"
  tensor_parallel_size = 2
  # On one node vLLM runs without Ray, on the first GPUs unless told:
  # give this serve the two GPUs "small" does not use.
  env                  = { MASTER_ADDR = ray_cluster.two.head_ip, CUDA_VISIBLE_DEVICES = "2,3" }
}

vllm_serve "big" {
  cluster              = ray_cluster.one
  model                = "big"
  tensor_parallel_size = 4
}
