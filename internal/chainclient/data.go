package chainclient

import (
	"context"
	"net/url"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
)

// Storage reads what the node's blob gateway stores (GET /v1/storage),
// with account's usage against its quota when account is not nil.
func (c *Client) Storage(ctx context.Context, account *address.Address) (*apiwire.Storage, error) {
	path := "/v1/storage"
	if account != nil {
		path += "?account=" + url.QueryEscape(account.String())
	}
	var out apiwire.Storage
	if _, err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NetPeers reads the API URL the node advertises and the nodes it knows
// (GET /v1/net/peers).
func (c *Client) NetPeers(ctx context.Context) (*apiwire.NetPeers, error) {
	var out apiwire.NetPeers
	if _, err := c.do(ctx, "GET", "/v1/net/peers", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
