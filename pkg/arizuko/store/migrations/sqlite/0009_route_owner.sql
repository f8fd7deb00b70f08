-- Who added each route (a principal): a tenant may remove only the routes it
-- added. Routes from before are the operator's ('').
ALTER TABLE routes ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
