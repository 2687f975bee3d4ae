-- w4_sqlite.sql - workload W4 for the sqlite3 shell: a fixed query mix on a
-- fresh database file (bench/run.sh removes it before every run and sets
-- @n, the number of rows, with .parameter).  Deterministic data, no random():
-- every run does the same work.  Mixes bulk inserts, index builds,
-- aggregates, a self-join, sorting, updates, deletes and small autocommit
-- transactions (bench/run.sh appends @n/100 single-row INSERTs into `log`,
-- each its own transaction: file I/O through the pread/pwrite hooks; no
-- fsync: synchronous=OFF keeps the disk out of the timing).
PRAGMA journal_mode=WAL;
PRAGMA synchronous=OFF;
PRAGMA cache_size=-16000;
CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b TEXT, c REAL);
WITH RECURSIVE cnt(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM cnt WHERE x < @n)
INSERT INTO t SELECT x, (x * 7919) % 1000, printf('%08x-%d', (x * 2654435761) % 4294967296, x % 97), (x % 1013) / 7.0 FROM cnt;
CREATE INDEX t_a ON t(a);
CREATE INDEX t_b ON t(b);
SELECT a, count(*), round(avg(c), 3) FROM t GROUP BY a ORDER BY 2 DESC, 1 LIMIT 3;
SELECT count(*) FROM t t1 JOIN t t2 ON t1.a = t2.a WHERE t1.id <= 300;
SELECT b FROM t ORDER BY b LIMIT 2 OFFSET 1000;
SELECT substr(b, 1, 2) AS k, count(*), sum(c) FROM t GROUP BY k ORDER BY k LIMIT 3;
UPDATE t SET c = c * 2 WHERE a % 7 = 0;
DELETE FROM t WHERE a % 11 = 0;
CREATE TABLE log(id INTEGER PRIMARY KEY, msg TEXT);
SELECT count(*), sum(length(b)) FROM t WHERE b LIKE '%-4%';
SELECT a, max(c) FROM t WHERE a BETWEEN 100 AND 900 GROUP BY a HAVING count(*) > 5 ORDER BY 2 DESC LIMIT 2;
