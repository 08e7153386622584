CREATE TRIGGER customers_before_update
BEFORE UPDATE ON customers
FOR EACH ROW
BEGIN
  IF NEW.email <> OLD.email THEN
    SET NEW.email_verified_at = NULL;
  END IF;
  IF NEW.status = 'closed' AND OLD.status <> 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'close accounts through the API';
  END IF;
END
