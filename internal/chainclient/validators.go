package chainclient

import (
	"context"
	"net/http"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// Validators returns the ledger's validators (GET /v1/validators).
func (c *Client) Validators(ctx context.Context) (*apiwire.ValidatorList, error) {
	var out apiwire.ValidatorList
	_, err := c.do(ctx, http.MethodGet, "/v1/validators", nil, &out)
	return &out, err
}
