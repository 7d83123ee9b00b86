node "spark1" {
  host = "a"
}

network "fabric" {
  cidr = "10.0.0.0/8"
}

ray_cluster "main" {
  image   = "img"
  head    = spark1
  network = network.fabric
}
