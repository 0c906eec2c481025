-- 0006: observed catalogs (issue 14): per app, what its stored answers used (tables, columns,
-- join pairs, literal values, with counts), learned by the nightly flow before it scores a day.
CREATE TABLE observed_catalogs (
    app_id      VARCHAR NOT NULL,
    version     INTEGER NOT NULL,          -- 1, 2, ... per app
    learned_for DATE NOT NULL,             -- the day it was learned for (from the days before it)
    queries     BIGINT NOT NULL,           -- answers it learned from
    catalog     JSON NOT NULL,             -- stef.observed.ObservedCatalog
    learned_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (app_id, version)
);
