CREATE PROCEDURE archive_old_orders(IN p_cutoff DATETIME, OUT p_moved INT)
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  START TRANSACTION;
  INSERT INTO orders_archive (id, customer_id, state, total, placed_at)
    SELECT id, customer_id, state, total, placed_at
      FROM orders
     WHERE placed_at < p_cutoff AND state IN ('delivered', 'cancelled');
  SET p_moved = ROW_COUNT();
  DELETE FROM orders
   WHERE placed_at < p_cutoff AND state IN ('delivered', 'cancelled');
  COMMIT;
END
