-- Docker Compose only (docker-compose.yml mounts it into the MariaDB image's initdb.d, run once as
-- root when the volume is new): the global grants the bridge's account needs beyond the demo
-- database the image gives it (README "Production security"). tools/stack's account has them all.
GRANT PROCESS, SLAVE MONITOR ON *.* TO 'outbox'@'%';            -- section 3a: who may still commit
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'outbox'@'%';  -- section 3b: the binlog doorbell
