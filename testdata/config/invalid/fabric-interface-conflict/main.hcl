# A node declares one fabric interface and the network map another.
variable "hosts" {
  default = {
    gx1 = { host = "10.1.230.180", iface = "enp1s0f0np0" }
    gx2 = { host = "10.1.230.181", iface = "enp1s0f1np1" }
    gx3 = { host = "10.1.230.182", iface = "ib0" }
  }
}

node "gx" {
  for_each         = var.hosts
  host             = each.value.host
  gpus             = 1
  fabric_interface = each.value.iface
}

network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = { gx2 = "eth1" }
}

ray_cluster "main" {
  image   = "img"
  head    = node.gx["gx1"]
  workers = [node.gx["gx2"], node.gx["gx3"]]
  network = network.fabric
}

vllm_serve "qwen" {
  cluster                = ray_cluster.main
  model                  = "Qwen/Qwen3-0.6B"
  pipeline_parallel_size = 3
}
