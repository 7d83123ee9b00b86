//go:build linux

package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A minimal NFQUEUE client over nfnetlink (no cgo, no libnetfilter_queue):
// it binds one queue in a network namespace, receives packet metadata only,
// and accepts every packet after a fixed delay. Packets of a queue get
// increasing ids and a constant delay keeps their order, so one batch
// verdict accepts everything that is due.

// nfnetlink constants (linux/netfilter/nfnetlink.h, nfnetlink_queue.h).
const (
	nfnlSubsysQueue     = 3
	nfqnlMsgPacket      = 0
	nfqnlMsgConfig      = 2
	nfqnlMsgVerdictBat  = 3
	nfqaPacketHdr       = 1
	nfqaVerdictHdr      = 2
	nfqaCfgCmd          = 1
	nfqaCfgParams       = 2
	nfqaCfgQueueMaxlen  = 3
	nfqaCfgMask         = 4
	nfqaCfgFlags        = 5
	nfqnlCfgCmdBind     = 1
	nfqnlCopyMeta       = 1
	nfqaCfgFFailOpen    = 1
	nfqaCfgFGSO         = 4
	nfAccept            = 1
	nfqueueMaxLen       = 1 << 16
	nlmsgHdrLen         = 16
	nfgenHdrLen         = 4
	nfqueueRecvBufBytes = 16 << 20
)

// nfQueue delays every packet of one queue.
type nfQueue struct {
	f       *os.File
	num     uint16
	delay   time.Duration
	seq     atomic.Uint32
	pending chan queuedPacket
	done    chan struct{}
	once    sync.Once
	// Counters.
	packets atomic.Uint64
	err     atomic.Value // last error (string)
}

type queuedPacket struct {
	id  uint32
	due time.Time
}

// openNFQueue binds queue num in the network namespace at nsPath and starts
// delaying its packets.
func openNFQueue(nsPath string, num uint16, delay time.Duration) (*nfQueue, error) {
	var fd int
	err := inNetns(nsPath, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind netlink socket: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, nfqueueRecvBufBytes)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	q := &nfQueue{
		f:       os.NewFile(uintptr(fd), fmt.Sprintf("nfqueue-%d", num)),
		num:     num,
		delay:   delay,
		pending: make(chan queuedPacket, nfqueueMaxLen),
		done:    make(chan struct{}),
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0) // copy_range: metadata only
	params[4] = nfqnlCopyMeta
	maxLen := binary.BigEndian.AppendUint32(nil, nfqueueMaxLen)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen|nfqaCfgFGSO)
	for _, attrs := range [][]nlAttr{
		{{nfqaCfgCmd, cmd}},
		{{nfqaCfgParams, params}, {nfqaCfgQueueMaxlen, maxLen}, {nfqaCfgMask, flags}, {nfqaCfgFlags, flags}},
	} {
		if err := q.config(attrs); err != nil {
			q.f.Close()
			return nil, fmt.Errorf("configure NFQUEUE %d in %s: %w", num, nsPath, err)
		}
	}
	go q.receive()
	go q.release()
	return q, nil
}

type nlAttr struct {
	typ  uint16
	data []byte
}

// message builds one nfnetlink message of the queue subsystem.
func (q *nfQueue) message(msgType uint16, flags uint16, attrs []nlAttr) []byte {
	b := make([]byte, nlmsgHdrLen+nfgenHdrLen, 64)
	for _, a := range attrs {
		l := 4 + len(a.data)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], q.seq.Add(1))
	binary.NativeEndian.PutUint32(b[12:], 0)
	b[16] = unix.AF_UNSPEC
	b[17] = 0 // NFNETLINK_V0
	binary.BigEndian.PutUint16(b[18:], q.num)
	return b
}

// config sends a config message and waits for its acknowledgement (before
// the receive loop runs, so the ack is read here).
func (q *nfQueue) config(attrs []nlAttr) error {
	if _, err := q.f.Write(q.message(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, attrs)); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	_ = q.f.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer q.f.SetReadDeadline(time.Time{})
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			return fmt.Errorf("read ack: %w", err)
		}
		for msg := buf[:n]; len(msg) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(msg))
			if l < nlmsgHdrLen || l > len(msg) {
				break
			}
			if binary.NativeEndian.Uint16(msg[4:]) == unix.NLMSG_ERROR && l >= nlmsgHdrLen+4 {
				if code := int32(binary.NativeEndian.Uint32(msg[16:])); code != 0 {
					return unix.Errno(-code)
				}
				return nil
			}
			msg = msg[nlmsgAlign(l):]
		}
	}
}

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// receive reads queued packets' ids and hands them to release.
func (q *nfQueue) receive() {
	buf := make([]byte, 1<<16)
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			select {
			case <-q.done:
				return
			default:
			}
			if errors.Is(err, unix.ENOBUFS) {
				continue
			}
			q.err.Store(err.Error())
			return
		}
		now := time.Now()
		for msg := buf[:n]; len(msg) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(msg))
			if l < nlmsgHdrLen || l > len(msg) {
				break
			}
			typ := binary.NativeEndian.Uint16(msg[4:])
			if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket {
				if id, ok := packetID(msg[nlmsgHdrLen+nfgenHdrLen : l]); ok {
					q.packets.Add(1)
					q.pending <- queuedPacket{id: id, due: now.Add(q.delay)}
				}
			} else if typ == unix.NLMSG_ERROR && l >= nlmsgHdrLen+4 {
				if code := int32(binary.NativeEndian.Uint32(msg[16:])); code != 0 {
					q.err.Store(unix.Errno(-code).Error())
				}
			}
			msg = msg[nlmsgAlign(l):]
		}
	}
}

// packetID finds NFQA_PACKET_HDR in a packet message's attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[nlmsgAlign(l):]
	}
	return 0, false
}

// release accepts packets once their delay has passed.
func (q *nfQueue) release() {
	var next *queuedPacket
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if next == nil {
			select {
			case p := <-q.pending:
				next = &p
			case <-q.done:
				return
			}
		}
		if wait := time.Until(next.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-q.done:
				return
			}
		}
		last := next.id
		next = nil
	drain:
		for {
			select {
			case p := <-q.pending:
				if p.due.After(time.Now()) {
					next = &p
					break drain
				}
				last = p.id
			default:
				break drain
			}
		}
		hdr := binary.BigEndian.AppendUint32(nil, nfAccept)
		hdr = binary.BigEndian.AppendUint32(hdr, last)
		if _, err := q.f.Write(q.message(nfqnlMsgVerdictBat, unix.NLM_F_REQUEST, []nlAttr{{nfqaVerdictHdr, hdr}})); err != nil {
			q.err.Store("verdict: " + err.Error())
		}
	}
}

// close unbinds the queue (closing the socket); queued packets are then
// accepted by the kernel's --queue-bypass/fail-open handling or dropped.
func (q *nfQueue) close() {
	q.once.Do(func() {
		close(q.done)
		q.f.Close()
	})
}

// alive reports whether the queue still runs, with its last error.
func (q *nfQueue) alive() (bool, string) {
	select {
	case <-q.done:
		return false, "closed"
	default:
	}
	if e, ok := q.err.Load().(string); ok && e != "" {
		return false, e
	}
	return true, ""
}
