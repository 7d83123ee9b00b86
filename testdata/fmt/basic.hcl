project="llama"
parallelism   =   4
node "spark-a" {
host="10.1.230.180"
    user = "ubuntu"
  fabric_interface="enp1s0f1np1"
   fabric_address = "192.168.200.12"
}
