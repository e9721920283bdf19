package sigio

import (
	"errors"
	"io"
	"os"

	"github.com/m2ho/m2ho/signaling"
)

// Source is a stream of events from a file: a signaling.Reader that holds
// the file open until Close.
type Source interface {
	signaling.Reader
	Close() error
}

type fileSource struct {
	signaling.Reader
	f *os.File
}

func (s *fileSource) Close() error { return s.f.Close() }

// Open opens path as a Source; see signaling.NewReader for how FormatAuto
// decides.
func Open(path string, format signaling.Format) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := signaling.NewReader(f, path, format)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileSource{r, f}, nil
}

// ReadAll reads every event of path. Bad lines do not stop it: their
// *ParseErrors are returned in order; any other error (I/O) ends the read
// and is the last element of errs.
func ReadAll(path string, format signaling.Format) ([]signaling.Event, signaling.Stats, []error) {
	src, err := Open(path, format)
	if err != nil {
		return nil, signaling.Stats{}, []error{err}
	}
	defer src.Close()
	var (
		events []signaling.Event
		errs   []error
	)
	for {
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
			var pe *signaling.ParseError
			if errors.As(err, &pe) {
				continue
			}
			break
		}
		events = append(events, e)
	}
	return events, src.Stats(), errs
}
