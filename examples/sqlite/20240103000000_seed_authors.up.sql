INSERT INTO authors (name) VALUES ('Ursula K. Le Guin'), ('Octavia E. Butler');
