package chainclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
)

// Validators returns the ledger's validators (GET /v1/validators).
func (c *Client) Validators(ctx context.Context) (*apiwire.ValidatorList, error) {
	var out apiwire.ValidatorList
	_, err := c.do(ctx, http.MethodGet, "/v1/validators", nil, &out)
	return &out, err
}

// Validator returns one validator, its delegation pool and delegations
// (GET /v1/validators/{addr}); addr is its operator's address or its
// consensus address. IsNotFound(err) when no validator has it.
func (c *Client) Validator(ctx context.Context, addr string) (*apiwire.ValidatorBody, error) {
	var out apiwire.ValidatorBody
	if _, err := c.do(ctx, http.MethodGet, "/v1/validators/"+url.PathEscape(addr), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delegations returns what a has delegated, is unbonding and has
// redelegated (GET /v1/accounts/{addr}/delegations).
func (c *Client) Delegations(ctx context.Context, a address.Address) (*apiwire.DelegatorBody, error) {
	var out apiwire.DelegatorBody
	if _, err := c.do(ctx, http.MethodGet, "/v1/accounts/"+a.String()+"/delegations", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ProviderDelegations returns a provider's delegation pool and
// delegations (GET /v1/providers/{addr}/delegations); IsNotFound(err)
// when a is not a registered provider.
func (c *Client) ProviderDelegations(ctx context.Context, a address.Address) (*apiwire.TargetDelegationsBody, error) {
	var out apiwire.TargetDelegationsBody
	if _, err := c.do(ctx, http.MethodGet, "/v1/providers/"+a.String()+"/delegations", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
