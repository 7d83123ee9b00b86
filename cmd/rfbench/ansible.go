//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/transport/shell"
)

// ansibleFiles are the inventory, configuration and playbook generated for
// one lab.
type ansibleFiles struct {
	dir       string // holds the files, and HOME of the ansible processes
	config    string // ansible.cfg
	playbook  string // check.yml
	inventory string
}

// ansibleInventory renders an INI inventory of the lab: the head and the
// workers as groups, every host reached with the lab's ssh_config (key,
// known_hosts, strict host key checking) and the same algorithms as the
// floor and rayform, and each host's peers' fabric addresses for the
// playbook's route checks.
func ansibleInventory(l *lab.Lab, algos algorithms) string {
	var b strings.Builder
	b.WriteString("[head]\n")
	fmt.Fprintf(&b, "%s ansible_host=%s\n", l.Nodes[0].Name, l.Nodes[0].MgmtIP)
	b.WriteString("\n[workers]\n")
	for _, n := range l.Nodes[1:] {
		fmt.Fprintf(&b, "%s ansible_host=%s\n", n.Name, n.MgmtIP)
	}
	var fabric []string
	for _, n := range l.Nodes {
		fabric = append(fabric, n.FabricIP)
	}
	common := append([]string{"-F", l.SSHConfig}, algos.sshOptions()...)
	b.WriteString("\n[all:vars]\n")
	b.WriteString("ansible_user=root\n")
	fmt.Fprintf(&b, "ansible_ssh_private_key_file=%s\n", l.Key)
	b.WriteString("ansible_python_interpreter=/usr/bin/python3\n")
	fmt.Fprintf(&b, "ansible_ssh_common_args=%s\n", strings.Join(common, " "))
	fmt.Fprintf(&b, "fabric_addrs=%s\n", strings.Join(fabric, " "))
	return b.String()
}

// ansibleConfig keeps Ansible's defaults (pipelining off, ControlMaster=auto
// with ControlPersist=60s, linear strategy, implicit fact gathering) except
// forks, which is the number of hosts so every host runs at once.
func ansibleConfig(inventory string, forks int) string {
	return fmt.Sprintf(`# Written by rfbench. Ansible's defaults except forks (= the number of hosts).
[defaults]
inventory = %s
forks = %d
host_key_checking = True
retry_files_enabled = False
deprecation_warnings = False
interpreter_python = /usr/bin/python3
`, inventory, forks)
}

// ansiblePlaybook inspects, without changing anything (and run with
// --check), what rayform plan observes: facts (addresses, routes, memory),
// the GPUs, the route to every peer's fabric address, the image and the
// cluster container (docker inspect), and on the head Ray's node table and
// vLLM's health (curl to the dashboard and the serve port).
func ansiblePlaybook(container, image string) string {
	return fmt.Sprintf(`# Written by rfbench: inspect what rayform plan observes. Run with --check.
- name: Inspect the Ray cluster
  hosts: all
  gather_facts: true
  vars:
    container: %s
    image: %s
  tasks:
    - name: GPUs
      ansible.builtin.command: nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version --format=csv,noheader,nounits
      changed_when: false
      check_mode: false

    - name: Routes to the fabric addresses
      ansible.builtin.shell: for a in {{ fabric_addrs }}; do ip -j route get "$a"; done
      changed_when: false
      check_mode: false

    - name: Image
      ansible.builtin.command: docker image inspect {{ image }}
      changed_when: false
      check_mode: false
      failed_when: false

    - name: Cluster container
      ansible.builtin.command: docker inspect {{ container }}
      register: inspect
      changed_when: false
      check_mode: false
      failed_when: false

    - name: Container is running
      ansible.builtin.debug:
        msg: "{{ container }} running: {{ (inspect.stdout | from_json)[0].State.Running if inspect.rc == 0 else false }}"

    - name: Ray's node table
      ansible.builtin.command: curl -sS -m 15 http://127.0.0.1:8265/api/v0/nodes
      when: inventory_hostname in groups['head']
      changed_when: false
      check_mode: false
      failed_when: false

    - name: vLLM health
      ansible.builtin.command: curl -sS -m 15 -o /dev/null -w "%%{http_code}" http://127.0.0.1:8000/health
      when: inventory_hostname in groups['head']
      changed_when: false
      check_mode: false
      failed_when: false
`, container, image)
}

// writeAnsible writes the inventory, configuration and playbook under dir.
func writeAnsible(dir string, l *lab.Lab, algos algorithms) (*ansibleFiles, error) {
	f := &ansibleFiles{
		dir:       filepath.Join(dir, "ansible"),
		inventory: filepath.Join(dir, "ansible", "inventory.ini"),
		config:    filepath.Join(dir, "ansible", "ansible.cfg"),
		playbook:  filepath.Join(dir, "ansible", "check.yml"),
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("ansible dir: %w", err)
	}
	image, _, _ := strings.Cut(lab.ImageRayVLLM, ":")
	files := map[string]string{
		f.inventory: ansibleInventory(l, algos),
		f.config:    ansibleConfig(f.inventory, len(l.Nodes)),
		f.playbook:  ansiblePlaybook("rayform-"+clusterName, image),
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
	}
	return f, nil
}

// env is the environment of one Ansible run: its configuration, a HOME of
// its own, and a fresh ControlMaster directory, so no connection survives
// from one repetition to the next.
func (f *ansibleFiles) env(controlDir string) []string {
	return []string{
		"HOME=" + f.dir,
		"ANSIBLE_CONFIG=" + f.config,
		"ANSIBLE_SSH_CONTROL_PATH_DIR=" + controlDir,
		"ANSIBLE_NOCOLOR=1",
	}
}

// stopMastersScript ends the ControlPersist masters a run left in dir (their
// sockets are files, reachable from any namespace).
func stopMastersScript(dir string) string {
	return fmt.Sprintf(`for s in %s/*; do [ -S "$s" ] && ssh -o ControlPath="$s" -O exit x >/dev/null 2>&1; done; rm -rf %s`,
		shell.Quote(dir), shell.Quote(dir))
}
