-- Runs first (see schedule): the extension and a helper for the other tests.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS cuckoo;
RESET client_min_messages;
\set VERBOSITY terse
-- err(q): runs q and shows the SQLSTATE and message of its error, if any.
CREATE OR REPLACE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $f$;
