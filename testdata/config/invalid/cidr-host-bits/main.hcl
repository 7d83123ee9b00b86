network "fabric" {
  cidr = "192.168.200.12/24"
}
