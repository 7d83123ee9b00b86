rayform {
  project = "my project"
}

rayform {
  project = "gx"
}

node "a" {
  host = "h"
}
