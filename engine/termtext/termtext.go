// Package termtext makes text read from hosts (logs, command output) safe
// to print on an operator's terminal: a log is data, and must not retitle,
// clear or write the clipboard of the terminal that shows it. It is the one
// home of that filtering, for rayform logs and diagnose alike.
package termtext

// Plain returns line without terminal control sequences: ECMA-48's
// CSI (ESC [ … final byte, or the 8-bit U+009B), OSC, DCS, SOS, PM and APC
// strings up to their terminator (BEL or ST, or the end of the line), other
// two-byte escapes, C1 controls, and every C0 control but the tab. What is
// left is the text as a person reads it; invalid UTF-8 is kept as it is.
func Plain(line []byte) []byte {
	out := make([]byte, 0, len(line))
	for i := 0; i < len(line); {
		c := line[i]
		var intro byte // the sequence's introducer, in its 7-bit form
		n := 1
		switch {
		case c == 0x1b && i+1 < len(line):
			intro, n = line[i+1], 2
		case c == 0x1b:
			i++
			continue
		case c == 0xc2 && i+1 < len(line) && line[i+1] >= 0x80 && line[i+1] <= 0x9f:
			// A C1 control encoded in UTF-8: U+0080..U+009F.
			intro, n = line[i+1]-0x40, 2
		case c == '\t' || c >= 0x20 && c != 0x7f:
			out = append(out, c)
			i++
			continue
		default: // C0 controls and DEL
			i++
			continue
		}
		i += n
		switch intro {
		case '[': // CSI: parameter and intermediate bytes, then a final byte
			for i < len(line) && (line[i] < 0x40 || line[i] > 0x7e) {
				i++
			}
			i++
		case ']', 'P', 'X', '^', '_': // strings ended by BEL or ST
			for i < len(line) {
				if line[i] == 0x07 {
					i++
					break
				}
				if line[i] == 0x1b && i+1 < len(line) && line[i+1] == '\\' {
					i += 2
					break
				}
				if line[i] == 0xc2 && i+1 < len(line) && line[i+1] == 0x9c {
					i += 2
					break
				}
				i++
			}
		default:
			// A two-byte escape (ESC 7, ESC c, …): both bytes go. ESC
			// followed by an intermediate byte takes its final byte too.
			for intro >= 0x20 && intro <= 0x2f && i < len(line) {
				intro = line[i]
				i++
			}
		}
	}
	return out
}
