package command

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/resources/diagnose"
)

// runDiagnose classifies logs given as files or on stdin, with no
// configuration: a hand-run deployment's logs as well as rayform's.
func runDiagnose(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseDiagnose, args)
	if !ok {
		return code
	}
	view := views.NewDiagnose(a.ViewType, m.View)
	logs, err := readLogs(m, a.Paths)
	if err != nil {
		view.Error(err)
		return ExitError
	}
	d := diagnose.Classify(diagnose.Input{Logs: logs})
	if err := view.Show(d, a.Paths); err != nil {
		view.Error(err)
		return ExitError
	}
	if d.Failure {
		return ExitCause
	}
	return ExitOK
}

// readLogs reads the window of each log ("-": stdin, once).
func readLogs(m *Meta, paths []string) ([]diagnose.Log, error) {
	logs := make([]diagnose.Log, 0, len(paths))
	stdinRead := false
	for _, p := range paths {
		// Each input is read as a stream into a bounded window
		// (diagnose.ReadLog): a log of any size, or an endless stdin, is
		// classified in bounded memory.
		var (
			l   diagnose.Log
			err error
		)
		if p == "-" {
			if stdinRead {
				return nil, errors.New(`"-" (stdin) given more than once`)
			}
			stdinRead = true
			l, err = diagnose.ReadLog(m.Stdin, "", "stdin")
			if err != nil {
				err = fmt.Errorf("read stdin: %w", err)
			}
		} else {
			l, err = readLogFile(p)
		}
		if err != nil {
			return nil, err
		}
		logs = append(logs, l)
	}
	return logs, nil
}

// readLogFile reads the window of the log file at path.
func readLogFile(path string) (diagnose.Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return diagnose.Log{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	l, err := diagnose.ReadLog(f, "", path)
	if err != nil {
		return diagnose.Log{}, fmt.Errorf("read %s: %w", path, err)
	}
	return l, nil
}
