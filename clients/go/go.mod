module outbox-bridge/clients/go

go 1.19

require (
	github.com/go-sql-driver/mysql v1.5.0
	github.com/nats-io/nats.go v1.22.1
	github.com/nats-io/nkeys v0.3.0
)

require (
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.4.0 // indirect
)
