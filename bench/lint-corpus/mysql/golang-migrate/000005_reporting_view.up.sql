CREATE OR REPLACE
  ALGORITHM = MERGE
  SQL SECURITY INVOKER
  VIEW customer_order_totals AS
SELECT c.id AS customer_id,
       c.email,
       COUNT(o.id) AS orders,
       COALESCE(SUM(o.total), 0) AS lifetime_total
  FROM customers c
  LEFT JOIN orders o ON o.customer_id = c.id
 GROUP BY c.id, c.email;

GRANT SELECT ON customer_order_totals TO 'reporting'@'%';
