network "fabric" {
  interface = "enp1s0f1np1"
}
