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
  volumes = ["/data/hf"]
}
