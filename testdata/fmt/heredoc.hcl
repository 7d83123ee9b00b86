node "a" {
  pre_start = <<-EOT
    sudo sysctl -w net.core.rmem_max=67108864
      echo "${self.host}"
  EOT
 labels={"rayform.io/project"="llama","x"=1}
    name = "node-${var.index}"
  enabled = var.count>1&&!var.disabled?true:false
}
