DELETE FROM authors WHERE name IN ('Ursula K. Le Guin', 'Octavia E. Butler');
