package api

import (
	"context"
	"fmt"
	"net/http"
)

// UIResponse is the body of GET /v1/ui.
type UIResponse struct {
	// URL is the dashboard's address with its token: a secret, given only
	// to the socket's peers (our own uid).
	URL string `json:"url"`
}

// ui answers the dashboard's URL, or 404 when this up serves none.
func (s *Server) ui(_ context.Context, r *http.Request, _ []byte) (any, error) {
	if len(r.URL.RawQuery) > 0 {
		return nil, fmt.Errorf("%w: unexpected query", ErrInvalid)
	}
	if s.DashboardURL == "" {
		return nil, fmt.Errorf("%w: this procfleet up serves no dashboard (start it with --ui ADDR, e.g. --ui 127.0.0.1:7070)", ErrNotFound)
	}
	return UIResponse{URL: s.DashboardURL}, nil
}

// UI returns the URL of the running up's dashboard, with its token. An up
// that serves none answers an error matching ErrNotFound.
func (c *Client) UI(ctx context.Context) (string, error) {
	var out UIResponse
	if err := c.do(ctx, http.MethodGet, "/v1/ui", nil, &out); err != nil {
		return "", err
	}
	if out.URL == "" {
		return "", fmt.Errorf("api: GET /v1/ui on %s: the answer holds no URL", c.path)
	}
	return out.URL, nil
}
