package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeUserSCRAMCredentials: v0
//
// Version notes:
//   - v0: the lowest version served

// AlterUserSCRAMCredentials: v0
//
// Version notes:
//   - v0: the lowest version served

// DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the
// SCRAM credentials of the metadata image, never their keys; alterations on
// the active controller (forwarded there by other brokers). Their gates
// (authz_forward.go) check DESCRIBE and ALTER on the cluster.
func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, handleDescribeUserSCRAMCredentials)
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, handleAlterUserSCRAMCredentials)
}

func handleDescribeUserSCRAMCredentials(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	byUser := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	for _, c := range b.image().ScramCredentials() {
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = c.Mechanism, c.Iterations
		byUser[c.Name] = append(byUser[c.Name], ci)
	}
	result := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		r.CredentialInfos = byUser[user]
		return r
	}
	if len(req.Users) == 0 {
		users := make([]string, 0, len(byUser))
		for u := range byUser {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		r := result(u.Name)
		switch {
		case count[u.Name] > 1:
			r.CredentialInfos = nil
			r.ErrorCode = kerr.DuplicateResource.Code
			msg := fmt.Sprintf("Cannot describe SCRAM credentials for the same user twice in a single request: %s", u.Name)
			r.ErrorMessage = &msg
		case len(r.CredentialInfos) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			msg := fmt.Sprintf("Attempt to describe a user credential that does not exist: %s", u.Name)
			r.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func handleAlterUserSCRAMCredentials(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var dels []controller.ScramDeletion
	var ups []controller.ScramUpsertion
	var order []string
	seen := map[string]bool{}
	note := func(name string) {
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name)
		dels = append(dels, controller.ScramDeletion{Name: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		note(u.Name)
		ups = append(ups, controller.ScramUpsertion{Name: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	results, err := b.ctrl.AlterUserScramCredentials(ctx, dels, ups)
	for _, name := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = name
		e := err
		if e == nil {
			e = results[name]
		}
		r.ErrorCode, r.ErrorMessage = errCode(e), errMessage(e)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
