// Package jsonfile reads and writes the small JSON files rayform keeps on the
// local disk (the state file and saved plans): writes are atomic, reads are
// strict and report errors with the file name, line and column. Its atomic
// write (Replace, WriteAtomic) is the one every local file write uses: rayform
// fmt, the local transport's uploads, the lab's files.
package jsonfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteAtomic replaces the file at path with data, or leaves it untouched,
// creating the directory (mode 0700) if needed; see Replace.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return Replace(path, data, perm)
}

// Replace replaces the file at path, in a directory that exists, with data,
// or leaves it untouched. It is the one atomic write of a local file: it
// writes a temporary file in the same directory, syncs it, renames it over
// path and syncs the directory, so a crash at any point leaves either the
// old file or the new one, never a mixture. The file gets mode perm. A
// symlink at path is replaced, not followed.
func Replace(path string, data []byte, perm fs.FileMode) error {
	return writeAtomic(path, data, perm, func(w io.Writer, b []byte) error {
		_, err := w.Write(b)
		return err
	})
}

// writeAtomic is Replace with the write of the temporary file's content
// replaceable, so tests can make it fail half way.
func writeAtomic(path string, data []byte, perm fs.FileMode, write func(io.Writer, []byte) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := write(tmp, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("writing %s: sync directory: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable. Filesystems that cannot sync a
// directory (EINVAL) are tolerated: there is nothing more to do on them.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// Decode unmarshals data, the content of the file at path, into v. Unknown
// fields, trailing data and an empty file are errors. Every error names the
// file, and syntax and type errors name the line and column, e.g.
// ".rayform/state.json:3:14: invalid character '}' looking for beginning of
// object key string".
func Decode(path string, data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: file is empty", path)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return PositionError(path, data, err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		rest := data[end:]
		end += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		line, col := Position(data, end)
		return fmt.Errorf("%s:%d:%d: unexpected data after the top-level JSON value", path, line, col)
	}
	return nil
}

// PositionError wraps err, an error from decoding data (the content of the
// file at path), with the file name and, where err carries an offset, the
// line and column.
func PositionError(path string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included.
		line, col := Position(data, syn.Offset-1)
		return fmt.Errorf("%s:%d:%d: %w", path, line, col, err)
	case errors.As(err, &typ):
		// Offset is just past the value of the wrong type.
		line, col := Position(data, typ.Offset-1)
		return fmt.Errorf("%s:%d:%d: %w", path, line, col, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := Position(data, int64(len(data)))
		return fmt.Errorf("%s:%d:%d: unexpected end of JSON input (truncated file?)", path, line, col)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Position converts a byte offset in data into a 1-based line and column
// (counted in bytes). Offsets past the end are clamped to the end.
func Position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	if offset < 0 {
		offset = 0
	}
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
