-- Add a few columns used by the billing integration.
ALTER TABLE accounts ADD COLUMN billing_ref uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE accounts ADD COLUMN trial_ends_at timestamptz DEFAULT now() + interval '14 days';
ALTER TABLE accounts ADD COLUMN seats integer NOT NULL DEFAULT 1,
                     ADD COLUMN last_seen_at timestamptz DEFAULT clock_timestamp();
ALTER TABLE accounts ADD COLUMN region text DEFAULT 'eu-west-1';
