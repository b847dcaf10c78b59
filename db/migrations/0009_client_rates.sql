-- Up Migration
-- A client's rate (users a second, declared with its credential) is one budget for the whole
-- deployment: every process that serves the client leases a share of it, fair by the users each
-- was asked for (demand, users a second), and spends that share on its own. A lease and a
-- process are alive until expires_at, the database's clock, renewed every few seconds by the
-- process itself; a process that dies stops renewing, and its share goes to the others once its
-- rows expire. Rows expired a minute ago are deleted by whichever process renews next.
CREATE TABLE rate_processes (
  process    text COLLATE "C" NOT NULL,
  expires_at timestamptz NOT NULL,
  CONSTRAINT rate_processes_pkey PRIMARY KEY (process)
);
CREATE INDEX rate_processes_expires_at ON rate_processes (expires_at);

CREATE TABLE rate_leases (
  client     text COLLATE "C" NOT NULL,
  process    text COLLATE "C" NOT NULL,
  demand     double precision NOT NULL,
  expires_at timestamptz NOT NULL,
  CONSTRAINT rate_leases_pkey PRIMARY KEY (client, process),
  CONSTRAINT rate_leases_demand CHECK (demand >= 0)
);
CREATE INDEX rate_leases_expires_at ON rate_leases (expires_at);

-- Down Migration
DROP TABLE rate_leases;
DROP TABLE rate_processes;
