-- Docker Compose only (docker-compose.yml mounts it into the MariaDB image's initdb.d, run once as
-- root when the volume is new): the global grants the bridge's account needs beyond the demo
-- database the image gives it (README "Production security"). tools/stack's account has them all.
GRANT PROCESS, SLAVE MONITOR ON *.* TO 'outbox'@'%';            -- README, "Which server a source reads"
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'outbox'@'%';  -- README, "The doorbell's account"
