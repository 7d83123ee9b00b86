network "fabric" {
  cidr = "192.168.200.0/33"
}
