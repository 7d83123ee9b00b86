# Two DGX Sparks on a fabric link.
network "fabric" {
  cidr = "192.168.200.0/24"   # the QSFP link
  mtu=9000 // jumbo frames
  /* the management network is
     not reachable from workers */
  management=false
}


// trailing comment
