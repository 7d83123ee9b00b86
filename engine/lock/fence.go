package lock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/names"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// fenceScript advances the fence of lock $1 on this host: under an
// exclusive flock of the fence file, it adds one to the generation the
// file holds and prints "FENCE <generation>". The file is written in
// place, never replaced, so that its flock stays one.
//
// The commands of an earlier holder that still run hold the file shared
// (transport.FencedScript). This script runs only under the lock, so they
// are an earlier generation's: a run that lost the lock, or the orphans of
// one that died where its SSH connection did not end them. It ends them
// rather than wait for them: each process that has the fence file open
// and runs a fenced script (its command line holds the fenced script's
// mark), outside this script's own process group, gets SIGTERM with its
// process group (SIGKILL 5 s later if the fence is still held), and is
// printed as "ENDED <pid> <the command's first line>".
//
// It also makes, once, the deployment's secret-digest key beside it,
// "$1.key" (observe.SecretKeyFile): 32 random bytes as 64 hex digits, mode
// 0600 (umask 077), written to a temporary file and renamed, so a reader
// sees a whole key or none. rayform digests secrets (resources'
// secretDigest) with an HMAC under this key, so a digest recorded on the
// hosts or in a plan cannot be checked against a guess without it. A
// missing or malformed key is made anew; an existing one is kept.
//
// Likewise the deployment's bearer token, "$1.bearer" (observe.BearerFile):
// the services a deployment starts demand it (Ray's token authentication),
// and rayform's own readings of them send it. The file is the HTTP header
// itself, "Authorization: Bearer " and 64 hex digits, so that curl sends it
// from the file (-H @FILE) and it never stands on a command line. A
// missing or malformed token is made anew, and so is every token when $2
// is "rotate" (AdvanceFence's rotate).
const fenceScript = `n=$1
` + lockDirScript + `f="$d/$n.fence"
if [ -L "$f" ]; then echo "BAD $f is a symbolic link"; exit 1; fi
exec 9<>"$f" || exit 1
if ! flock -n 9; then
  rf=$(readlink -f "$f")
  s=$(cat /proc/$$/stat)
  set -- ${s##*\)}
  own=$3 ts=
  for p in $(find /proc/[0-9]*/fd -lname "$rf" 2>/dev/null | cut -d/ -f3 | sort -un); do
    s=$(cat /proc/$p/stat 2>/dev/null) || continue
    set -- ${s##*\)}
    [ "$3" = "$own" ] && continue
    c=$(tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null) || continue
    case $c in ` + fencedMark + `) ;; *) continue ;; esac
    t=$p
    [ "$3" = "$p" ] && t=-$p
    kill -TERM $t 2>/dev/null || continue
    ts="$ts $t"
    printf 'ENDED %s %s\n' "$p" "$(printf '%s\n' "$c" | sed -n '3{s/^# //;p;q;}' | cut -c1-200)"
  done
  if [ -n "$ts" ] && ! flock -w 5 9; then kill -KILL $ts 2>/dev/null; fi
fi
flock -w 60 9 || { echo "BAD a command of an earlier holder of the lock has run on this host for more than 60 s; wait for it to end"; exit 1; }
g=$(cat "$f")
case $g in ''|*[!0-9]*) g=0 ;; esac
g=$((g + 1))
printf '%s\n' "$g" > "$f" || exit 1
k="$d/$n.key"
if [ -L "$k" ]; then echo "BAD $k is a symbolic link"; exit 1; fi
kv=$(cat "$k" 2>/dev/null)
case $kv in *[!0-9a-f]*) kv= ;; esac
if [ ${#kv} -ne 64 ]; then
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$k.$$" && mv -f "$k.$$" "$k" || { rm -f "$k.$$"; exit 1; }
fi
t="$d/$n.bearer"
if [ -L "$t" ]; then echo "BAD $t is a symbolic link"; exit 1; fi
tv=$(cat "$t" 2>/dev/null)
case $tv in "Authorization: Bearer "*) tv=${tv#Authorization: Bearer } ;; *) tv= ;; esac
case $tv in *[!0-9a-f]*) tv= ;; esac
if [ "$2" = rotate ] || [ ${#tv} -ne 64 ]; then
  { printf 'Authorization: Bearer '; od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; printf '\n'; } > "$t.$$" && mv -f "$t.$$" "$t" || { rm -f "$t.$$"; exit 1; }
fi
echo "FENCE $g"
`

// fencedMark is a shell pattern matching the command line of a fenced
// script (transport.FencedName in it), written so that this script's own
// command line does not match it.
const fencedMark = `*"rayform-fen""ced"*`

// FenceFile is the fence file of a lock name, in [transport.FenceDir].
func FenceFile(name string) string { return names.Segment(name) + ".fence" }

// Ended is a command of an earlier holder of a lock that AdvanceFence
// ended on a host: it still held the fence.
type Ended struct {
	PID int
	// Command is the command's first line, as the host ran it.
	Command string
}

func (e Ended) String() string { return fmt.Sprintf("pid %d: %s", e.PID, e.Command) }

// AdvanceFence advances the fence of the lock called name on conn's host
// and returns it, with the commands of earlier holders it ended there
// (see fenceScript). Call it while holding the lock, on every host the run
// will change, before observing them: from then on a command fenced
// (transport.Guard) with an earlier generation fails on that host, and the
// commands of an earlier holder that still ran have ended. With rotate, it
// also makes the deployment's bearer token anew (rayform apply
// -rotate-token): the services that demand the old one must be restarted
// with the new one, which the plan that follows shows.
func AdvanceFence(ctx context.Context, conn transport.Conn, name string, rotate bool) (transport.Fence, []Ended, error) {
	mode := "keep"
	if rotate {
		mode = "rotate"
	}
	res, err := conn.Run(ctx, transport.Cmd{
		Script:   "sh -c " + shell.Quote(fenceScript) + " rayform-lock-fence " + shell.Quote(names.Segment(name)) + " " + mode,
		Mutating: true,
		Timeout:  90 * time.Second,
	})
	var ended []Ended
	line := ""
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if rest, ok := strings.CutPrefix(l, "ENDED "); ok {
			pid, cmd, _ := strings.Cut(rest, " ")
			if n, perr := strconv.Atoi(pid); perr == nil {
				ended = append(ended, Ended{PID: n, Command: cmd})
				continue
			}
		}
		line = l
	}
	if g, ok := strings.CutPrefix(line, "FENCE "); ok && err == nil {
		gen, perr := strconv.ParseUint(g, 10, 64)
		if perr == nil {
			return transport.Fence{Lock: name, File: FenceFile(name), Gen: gen}, ended, nil
		}
	}
	if bad, ok := strings.CutPrefix(line, "BAD "); ok {
		return transport.Fence{}, ended, fmt.Errorf("fencing lock %q on %s: %s", name, conn.Host(), bad)
	}
	if err == nil {
		err = fmt.Errorf("unexpected answer %q", line)
	}
	return transport.Fence{}, ended, fmt.Errorf("fencing lock %q on %s: %w", name, conn.Host(), err)
}

// Name is the name of the lock of one deployment identity: a project's
// ray_cluster. Project and cluster are joined by '.', which a cluster's
// name (an HCL identifier) never holds, so different pairs never share a
// name ("hb-x"+"spark" is "hb-x.spark", "hb"+"x-spark" is "hb.x-spark"). A
// cluster name that holds a '.' or a byte names.Segment would change (from a
// hand-edited state) is replaced by '-' and a digest of it, which no
// identifier starts with.
func Name(project, cluster string) string {
	return project + "." + clusterPart(cluster)
}

func clusterPart(cluster string) string {
	ok := cluster != ""
	for i := 0; i < len(cluster); i++ {
		if c := cluster[i]; c == '.' || !names.Safe(c) {
			ok = false
		}
	}
	if ok {
		return cluster
	}
	sum := sha256.Sum256([]byte(cluster))
	return "-" + hex.EncodeToString(sum[:8])
}

// LegacyName is the name earlier rayform versions gave the same lock:
// project and cluster joined by '-', which two deployments can share. A
// run takes it too, after Name, so that an older rayform still running on
// the cluster is seen (and sees this run); force-unlock never breaks it.
func LegacyName(project, cluster string) string { return project + "-" + cluster }

// lockDirScript makes the locks directory (Dir) and refuses to go on when
// it, or ~/.rayform, is a symbolic link, not a directory, or not the SSH
// user's: the one check both the lock holder and the fence run first, with
// umask 077 so that what they write is the user's alone. It sets d.
const lockDirScript = `umask 077
d="$HOME/.rayform/locks"
mkdir -p "$d" || exit 1
for p in "$HOME/.rayform" "$d"; do
  if [ -L "$p" ] || [ ! -d "$p" ] || [ ! -O "$p" ]; then echo "BAD $p is not a directory owned by $(id -un)"; exit 1; fi
done
chmod 700 "$HOME/.rayform" "$d" || exit 1
`
